"""RunPod: the public GraphQL gpuTypes query."""

from gpuradar.core.providers.base import Provider

RUNPOD = Provider(
    name="runpod",
    kind="marketplace",
    default_interval=300,
    endpoints={"graphql": "https://api.runpod.io/graphql"},
    credentials={"api_key": "RUNPOD_API_KEY"},
    options={"max_gpus": int},
    notes=("GraphQL gpuTypes + lowestPrice stock; region = secure|community cloud; "
           "price per GPU-hour x GPUs; no spot (RunPod ended spot pods)."),
)
