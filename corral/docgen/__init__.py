"""Manual pages and bash completion generated from the commands' own argparse
parsers (never kept by hand): ``python -m corral.docgen man DIR`` and
``python -m corral.docgen completion SCRIPT``; the Debian package runs both."""
