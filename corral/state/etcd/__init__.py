"""etcd backends of the state ports (a cluster with master candidates) and
the etcd members Corral runs."""
