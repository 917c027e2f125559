"""AWS: public price files and Spot Advisor; with credentials, per-zone spot history."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpuradar.core.providers.base import Options, Provider, family

# What EC2 sells as Capacity Blocks for ML (DescribeCapacityBlockOfferings, with credentials):
# the instance types of AWS's EC2 User Guide, "Capacity Blocks for ML" (p5, p5e, p5en, p4d,
# trn1, trn2), and p6-b200, which AWS launched for Capacity Blocks only (no on-demand, Spot
# or Savings Plans at launch); the UltraServers by their UltraserverType, asked with
# UltraserverCount 1 (u-p6e-gb200x36/x72: GB200 NVL36/NVL72, the types of AWS's price file;
# u-trn2x64: four trn2u.48xlarge, AWS Neuron's Trn2 architecture page).
# AWS's Price List has trn2.48xlarge only as `marketoption = CapacityBlock` at $0.00 (a public
# project's Price List API read, 2026-10): a $0 on-demand row of these types means "not sold
# on demand", not a price.
CAPACITY_BLOCK_TYPES: tuple[str, ...] = (
    "p4d.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
    "trn1.32xlarge", "trn2.48xlarge")
CAPACITY_BLOCK_ULTRASERVERS: tuple[str, ...] = ("u-p6e-gb200x36", "u-p6e-gb200x72",
                                                "u-trn2x64")
# The block asked for: the shortest EC2 sells (CapacityDurationHours: 1-day steps up to 14
# days, then 7-day steps up to 182 days; botocore's EC2 model), one instance.
CAPACITY_BLOCK_HOURS = 24

# The back-fill of spot history (with credentials): on the first crawl of a region (no
# per-zone spot offer stored for the region yet), the last
# BACKFILL_DAYS of DescribeSpotPriceHistory (EC2 keeps 90 days: botocore's model, "the
# Spot price history ... up to the past 90 days"), BACKFILL_PAGE_SIZE results a page, at
# most BACKFILL_MAX_PAGES pages a region: a bound of 20 requests and 20,000 change points
# per region. A region whose history does not fit is not back-filled (said, counted) and
# gets the ordinary current-hour request instead.
BACKFILL_DAYS = 90
BACKFILL_PAGE_SIZE = 1000
BACKFILL_MAX_PAGES = 20

#: What an AWS spot offer's interruption band is read from (attributes["interruption_source"]).
ADVISOR_SOURCE = "AWS Spot Advisor"


#: Where botocore's credential chain looks, apart from the container and instance roles
#: (botocore.credentials.create_credential_resolver, botocore 1.40: the AWS_* environment,
#: the config and shared credentials files, boto's files; each file's AWS_*/BOTO_CONFIG
#: variable counts as an AWS_* variable). With none of them there is nothing to find.
CREDENTIAL_FILES = ("~/.aws/config", "~/.aws/credentials", "/etc/boto.cfg", "~/.boto")
#: AWS_* variables that only tune the SDK (botocore.configprovider, 1.40), never a source of
#: credentials: set alone (AWS_CA_BUNDLE on a machine with a corporate CA), they do not make
#: `sources` load botocore (with AWS_ENDPOINT_URL and its per-service AWS_ENDPOINT_URL_*).
AWS_SETTINGS = frozenset({
    "AWS_CA_BUNDLE", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE",
    "AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT", "AWS_STS_REGIONAL_ENDPOINTS",
    "AWS_DEFAULTS_MODE", "AWS_SDK_UA_APP_ID", "AWS_METADATA_SERVICE_TIMEOUT",
    "AWS_METADATA_SERVICE_NUM_ATTEMPTS", "AWS_EXECUTION_ENV"})


def _nowhere_to_look(opts: Options) -> bool:
    """True when botocore's chain without the roles could find nothing: `sources` then
    says so without loading botocore (a third of a second of imports)."""
    if opts.get("profile") or opts.get("access_key_id"):
        return False
    if any((k.startswith("AWS_") and k not in AWS_SETTINGS
            and not k.startswith("AWS_ENDPOINT_URL")) or k == "BOTO_CONFIG"
           for k in os.environ):
        return False
    return not any(Path(p).expanduser().exists() for p in CREDENTIAL_FILES)


def credential_source(opts: Options, with_roles: bool = True) -> Any:
    """botocore Credentials from the source options (with the environment's) or botocore's
    standard chain; None if none or per-zone spot prices are off; the exception when a
    profile is broken. botocore is imported only here, when asked.

    `with_roles=False` skips the container and instance-metadata lookups (network calls),
    for `gpuradar sources` and a replay."""
    if opts.get("spot_history") is False or (not with_roles and _nowhere_to_look(opts)):
        return None
    from botocore.credentials import Credentials, create_credential_resolver
    from botocore.session import Session

    if opts.get("access_key_id") and opts.get("secret_access_key"):
        return Credentials(opts.get("access_key_id"), opts.get("secret_access_key"),
                           opts.get("session_token"), method="config-file")
    try:
        resolver = create_credential_resolver(Session(profile=opts.get("profile")))
        if not with_roles:
            for provider in ("container-role", "iam-role"):
                resolver.remove(provider)  # a provider not in the chain is ignored
        return resolver.load_credentials()
    except Exception as exc:  # noqa: BLE001  (a broken profile must not stop public data)
        return exc


def describe_status(provider: Provider, opts: Options, configured: Options
                    ) -> tuple[bool, str]:
    """Public price files always; says whether credentials add per-zone spot prices
    (without the instance-role lookups: those are network calls, made at crawl time)."""
    public = "public price files"
    if opts.get("spot_history") is False:
        return True, public + "; per-zone spot prices off (sources.aws.spot_history)"
    creds = credential_source(opts, with_roles=False)
    if isinstance(creds, Exception):
        return True, public + f"; AWS credentials unusable ({type(creds).__name__})"
    if creds is not None:
        return True, (public + f"; AWS credentials found ({creds.method}): per-zone spot "
                      "prices" + ("" if opts.get("capacity_blocks") is False
                                  else ", Capacity Block offerings"))
    return True, (public + "; AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                  "AWS_PROFILE or sources.aws.profile; an instance role is tried at "
                  "crawl time) would add per-zone spot prices and Capacity Block offerings "
                  "(capacity blocks need credentials)")


AWS = Provider(
    name="aws",
    spot_signal=("AWS Spot Advisor interruption band per instance type and region (public "
                 "feed, read)"),
    describe=describe_status,
    kind="aws",
    default_interval=900,
    endpoints={
        "advisor": "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json",
        "locations": "https://b0.p.awsstatic.com/locations/1.0/aws/current/locations.json",
        "spot": "https://website.spot.ec2.aws.a2z.com/spot.json",
        "ondemand": "https://b0.p.awsstatic.com/pricing/2.0/meteredUnitMaps/ec2/USD/current/"
                    "ec2-ondemand-without-sec-sel/{location}/Linux/index.json",
        "ec2": "https://ec2.{region}.amazonaws.com/",
    },
    options={"regions": str | list[str], "spot_history": bool, "capacity_blocks": bool,
             "backfill": bool,
             "profile": str,
             "home_region": str, "access_key_id": str, "secret_access_key": str,
             "session_token": str},
    notes=("Public on-demand and spot price files (GPU, Trainium, Inferentia and Gaudi "
           "instances), Spot Advisor interruption bands; AWS credentials add per-zone spot "
           "prices (DescribeSpotPriceHistory; the first crawl of a region back-fills its last 90 "
           "days) and Capacity Block offerings "
           "(DescribeCapacityBlockOfferings: a 24 h block of one instance or UltraServer). "
           "Cannot see: capacity blocks without credentials, On-Demand Capacity "
           "Reservations, Savings Plans, availability of on-demand capacity; types listed "
           "at $0 on demand (p5e, trn2.48xlarge) and the UltraServers are not sold on "
           "demand."),
    # Every row: Amazon EC2 instance types, "Accelerated computing" specifications
    # (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html, its "Networking specifications"
    # and accelerator tables) and the product page of the family named in the note
    # (aws.amazon.com/ec2/instance-types/<family>/). G families are PCIe cards: their rows
    # say only which sizes have EFA, and the catalog's form factor answers inside the machine
    # (intra ""); a G size without EFA has no row (form factor, no fabric).
    # fmt: off
    interconnect=(
        # Trn1/Trn1n/Trn2: chips joined by NeuronLink, EFA networking (ec2/instance-types/trn1,
        # trn2); Inf2: NeuronLink between chips, no EFA (ec2/instance-types/inf2).
        family(r"^trn\d+n?\.(32|48)xlarge$", "neuronlink", "efa", "Trainium NeuronLink, EFA"),
        family(r"^inf2\.(24|48)xlarge$", "neuronlink", None, "Inferentia2 NeuronLink"),
        # P6e-GB200 UltraServers: NVLink domain of 72 GPUs, EFA (ec2/instance-types/p6).
        family(r"^p6e-gb\d00\.", "nvswitch", "efa", "GB200 NVL72 UltraServer, EFA"),
        # P6-B200/B300: 8 GPUs on NVLink 5 NVSwitch, EFAv4 (ec2/instance-types/p6).
        family(r"^p6-b\d00\.48xlarge$", "nvswitch", "efa", "HGX B200/B300 NVSwitch, EFA"),
        # P5/P5e/P5en.48xlarge: NVSwitch, 3200 Gbps EFA (ec2/instance-types/p5).
        family(r"^p5(e|en)?\.48xlarge$", "nvswitch", "efa",
               "HGX H100/H200 NVSwitch, 3200 Gbps EFA"),
        family(r"^p5\.4xlarge$", None, None, "one H100"),
        # P4d/P4de: NVSwitch, 400 Gbps EFA (ec2/instance-types/p4).
        family(r"^p4de?\.24xlarge$", "nvswitch", "efa", "HGX A100 NVSwitch, 400 Gbps EFA"),
        # P3dn: NVLink, 100 Gbps EFA; P3: NVLink, no EFA (ec2/instance-types/p3).
        family(r"^p3dn\.24xlarge$", "nvlink", "efa", "V100 NVLink, 100 Gbps EFA"),
        family(r"^p3\.", "nvlink", None, "V100 NVLink, no EFA"),
        # G sizes with EFA. G4dn/G5/G6/G6e/Gr6: AWS's EFA device-plugin chart, whose list is
        # `describe-instance-types --filters network-info.efa-supported=true` (aws/eks-charts
        # stable/aws-efa-k8s-device-plugin/values.yaml, citing the EC2 guide's "Supported
        # instance types" for EFA). G7e 8xlarge and up: the same describe-instance-types
        # answer in aws/sagemaker-hyperpod-cli#380, and NCCL over EFA on them in
        # dstackai/dstack#3752. G7: AWS's G7 launch gives up to 700 Gbps of EFA, the
        # 48xlarge's network; which smaller sizes have EFA was not confirmed.
        family(r"^g4dn\.(8|12|16)xlarge$|^g4dn\.metal$", "", "efa", "T4 PCIe cards, EFA"),
        family(r"^g5\.(8|12|16|24|48)xlarge$", "", "efa", "A10G PCIe cards, EFA"),
        family(r"^g6\.(8|12|16|24|48)xlarge$", "", "efa", "L4 PCIe cards, EFA"),
        family(r"^gr6\.8xlarge$", "", "efa", "L4 PCIe card, EFA"),
        family(r"^g6e\.(8|12|16|24|48)xlarge$", "", "efa", "L40S PCIe cards, EFA"),
        family(r"^g7e\.(8|12|24|48)xlarge$", "", "efa", "RTX PRO 6000 PCIe cards, EFA"),
        family(r"^g7\.48xlarge$", "", "efa", "RTX PRO 4500 PCIe cards, 700 Gbps EFA"),
        # DL1 and Inf1.24xlarge: EFA in the same chart; how their chips are linked inside
        # the machine is not stated here (None).
        family(r"^dl1\.24xlarge$", None, "efa", "Gaudi HL-205, EFA"),
        family(r"^inf1\.24xlarge$", None, "efa", "Inferentia, EFA"),
    ),
    # fmt: on
)
