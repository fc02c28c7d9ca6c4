"""Loss diagnostics: alert rules, the Autopsy model and the deterministic critic."""
