"""Pure planning of a run, used by `pulumi up` (components/) and the jobs CLI: the trainer's
command, preflight, the GPU-memory planner and the sourced facts they read. Imports only
jobs/contract of this repository."""
