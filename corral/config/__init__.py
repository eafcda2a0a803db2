"""The cluster configuration: a store of object rows and masterd's view of it."""
