"""The GRPO run: what it is, how it is planned, what runs it on the cluster, and the commands a
user runs on a workstation. One package per runtime (docs/development.md, "Source layout"):

    jobs/contract/  standard library only, imported by all: the data layout, the run spec and
                    run plan, records and log markers, exit codes, dataset names, the health
                    gate's plan and result
    jobs/head/      runs on the Ray head (and its GPU workers), shipped in the head's ConfigMap
                    with contract/: the run driver, the GPU wait, data staging, checkpoints,
                    the fabric and storage gate                          -> imports contract only
    jobs/plan/      pure planning for `pulumi up` and the CLI: renderers, preflight, the memory
                    planner, model shapes, versions, prices, the stack-file reader
                                                                         -> imports contract only
    jobs/cli/       the workstation commands (`gke-grpo ...`)    -> imports plan, contract

jobs/ imports nothing of Pulumi, components/ or tools/ (.importlinter).
"""
