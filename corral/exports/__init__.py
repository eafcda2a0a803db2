"""Instance exports as Ganeti keeps them: a directory per instance holding the
disk dumps and ``config.ini`` (see :mod:`corral.exports.config_ini`)."""
