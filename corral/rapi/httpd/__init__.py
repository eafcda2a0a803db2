"""corral-rapi's HTTP/1.1 server: TLS, deadlines, bounded connections."""
