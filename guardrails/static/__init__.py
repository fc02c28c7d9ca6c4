"""Static rules: what S and T may reach and do, judged from their source without running it."""
