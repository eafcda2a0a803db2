"""What Corral's HTTPS servers share: a listening socket with deadlines and
bounded connections, and the limits it enforces."""
