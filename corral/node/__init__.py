"""The node daemon's side: the HTTPS RPC server and its handlers, by domain."""
