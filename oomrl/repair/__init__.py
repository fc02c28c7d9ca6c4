"""The repair room: the repair loop, versions, promotion, probation, cross-validation."""
