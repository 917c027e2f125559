"""Routes for aws: the public price files and the signed EC2 Query API, from fixtures.

The on-demand files and the EC2 API have one URL per region. Their `aws.ondemand` and
`aws.ec2` entries give the URL templates the spider fills in ({location}, {region}); the
`aws.ondemand@<region>` and `aws.ec2@<region>` entries are the concrete per-region routes
(their endpoint overrides are unused)."""

from urllib.parse import parse_qs, quote

from tests.provider_server import Reply, Request, fixture

ONDEMAND = "/pricing/2.0/meteredUnitMaps/ec2/USD/current/ec2-ondemand-without-sec-sel/"
LOCATIONS = {"us-east-1": "US East (N. Virginia)", "us-west-2": "US West (Oregon)",
             "eu-north-1": "EU (Stockholm)", "af-south-1": "Africa (Cape Town)"}
ONDEMAND_PATHS = {f"{ONDEMAND}{quote(name)}/Linux/index.json": code
                  for code, name in LOCATIONS.items()}
XML = "text/xml;charset=UTF-8"


def advisor_handler(req: Request) -> Reply:
    return Reply(body=fixture("aws/spot-advisor-data.json"))


def locations_handler(req: Request) -> Reply:
    return Reply(body=fixture("aws/locations.json"))


def spot_handler(req: Request) -> Reply:
    return Reply(body=fixture("aws/spot.json"))


def ondemand_handler(req: Request) -> Reply:
    code = ONDEMAND_PATHS.get(req.path)
    if code is None:
        return Reply(403, b"<Error><Code>AccessDenied</Code></Error>", content_type=XML)
    return Reply(body=fixture(f"aws/ondemand_{code}.json"))


def ec2_handler(req: Request) -> Reply:
    """The EC2 Query API: the action is in the form body, the region in the path."""
    form = {k: v[0] for k, v in parse_qs(req.body.decode()).items()}
    region = req.path.strip("/").rsplit("/", 1)[-1]
    if form.get("Action") == "DescribeRegions":
        return Reply(body=fixture("aws/describe_regions.xml"), content_type=XML)
    if form.get("Action") == "DescribeSpotPriceHistory":
        if region == "us-east-1":
            page = "page2" if form.get("NextToken") else "page1"
            return Reply(body=fixture(f"aws/spot_history_us-east-1_{page}.xml"),
                         content_type=XML)
        return Reply(body=fixture(f"aws/spot_history_{region}.xml"), content_type=XML)
    if form.get("Action") == "DescribeCapacityBlockOfferings":
        # Capacity Blocks of p5.48xlarge in us-east-1; nothing else anywhere.
        found = region == "us-east-1" and form.get("InstanceType") == "p5.48xlarge"
        name = "capacity_blocks_us-east-1" if found else "capacity_blocks_none"
        return Reply(body=fixture(f"aws/{name}.xml"), content_type=XML)
    return Reply(400, b"<Response><Errors><Error><Code>InvalidAction</Code></Error></Errors>"
                 b"</Response>", content_type=XML)


ROUTES = {
    "aws.advisor": ("GET", "/spot-advisor-data.json", advisor_handler),
    "aws.locations": ("GET", "/locations/1.0/aws/current/locations.json", locations_handler),
    "aws.spot": ("GET", "/spot.json", spot_handler),
    "aws.ondemand": ("GET", ONDEMAND + "{location}/Linux/index.json", ondemand_handler),
    **{f"aws.ondemand@{code}": ("GET", path, ondemand_handler)
       for path, code in ONDEMAND_PATHS.items()},
    "aws.ec2": ("POST", "/ec2/{region}/", ec2_handler),
    **{f"aws.ec2@{code}": ("POST", f"/ec2/{code}/", ec2_handler) for code in LOCATIONS},
}
