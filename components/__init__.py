"""Pulumi components of gke-grpo: one ComponentResource per module, plus the typed config."""
