"""What runs on the Ray head (and, shipped by value, on its GPU workers): the run driver and its
stages. Shipped with jobs/contract in the head's ConfigMap (components/head_code.py); imports
nothing else of this repository, and ray or torch only where they are used."""
