"""What every runtime of a run agrees on, in the standard library only: imported by the Ray head's
code, the Pulumi program's planning and the workstation CLI alike."""
