"""corral-masterd: job queue, locks, configuration and logical units."""
