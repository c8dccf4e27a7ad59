"""The fixed ports of the stack's Ray pods, in a module of their own: the Ray pod templates
(components/ray_pods.py) open them and the config rules keep the run driver's metrics port off
them (components/config/facts.py), without the config importing the pod code."""

# Ray ports: GCS, dashboard (and Jobs API), client, metrics.
GCS_PORT, DASHBOARD_PORT, CLIENT_PORT, METRICS_PORT = 6379, 8265, 10001, 8080
# Ray's autoscaler's metrics server in the head pod (ray/autoscaler/_private/constants.py
# AUTOSCALER_METRIC_PORT, env AUTOSCALER_METRIC_PORT, default 44217: Ray 2.49.2, 2.54.0, 2.55.1).
AUTOSCALER_METRICS_PORT = 44217
