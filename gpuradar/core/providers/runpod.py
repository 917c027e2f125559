"""RunPod: the public GraphQL gpuTypes query."""

from __future__ import annotations

from gpuradar.core.providers.base import Options, Provider


def describe_status(provider: Provider, opts: Options, configured: Options
                    ) -> tuple[bool, str]:
    """Public: a key is sent when given, never needed for prices."""
    if opts.get("api_key"):
        return True, "public endpoint; RUNPOD_API_KEY found (sent, not needed for prices)"
    return True, "public endpoint, no key needed"


RUNPOD = Provider(
    name="runpod",
    describe=describe_status,
    kind="marketplace",
    default_interval=300,
    endpoints={"graphql": "https://api.runpod.io/graphql"},
    credentials={"api_key": "RUNPOD_API_KEY"},
    options={"max_gpus": int},
    notes=("GraphQL gpuTypes + lowestPrice + dataCenters: Secure Cloud per data center, "
           "Community Cloud region 'global' (no place in the answer); price per GPU-hour x "
           "GPUs; cannot see: spot (RunPod ended spot pods), savings plans."),
)
