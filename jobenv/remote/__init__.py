"""`--remote NAME`: the job commands run from a laptop on a cluster's login node over the user's
own ssh (one master connection per session), with the ordinary jobenv CLI on the other side:
remotes.py (the named remotes), ssh.py (the connection and the calls), tether.py (the remote
side), sync.py (`submit --sync`)."""
