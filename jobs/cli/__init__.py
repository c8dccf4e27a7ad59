"""The workstation commands (`python -m jobs ...`): submit, follow, stop, status, plot and report
a run of the deployed stack. Imports jobs/plan and jobs/contract, never jobs/head."""
