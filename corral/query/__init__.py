"""Generic queries: field definitions, filters and Ganeti's result format."""
