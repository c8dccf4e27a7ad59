"""The workstation commands (`gke-grpo ...`): submit, follow, stop, status, plot and report
a run of the deployed stack. Imports jobs/plan and jobs/contract, never jobs/head."""
