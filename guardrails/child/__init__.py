"""Code that runs inside the jail: it imports nothing of the gate (the launcher is copied in alone)."""
