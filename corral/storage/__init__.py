"""Disk storage as the master sees it: which disk templates exist and what they need."""
