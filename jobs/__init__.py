"""The GRPO job: spec, framework renderers, preflight, data preparation and the jobs CLI."""
