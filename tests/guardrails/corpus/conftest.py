"""The corpus is data for the gate (toy workspaces with their own tests): never collect it here."""

collect_ignore_glob = ["*"]
