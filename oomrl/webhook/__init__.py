"""The loss-alert webhook: signed HTTP alerts in, `repair` flow runs (or `oomrl.loss.alert` events)
out."""
