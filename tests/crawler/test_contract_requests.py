"""Request contracts: gpuradar's signed requests against the providers' official SDKs.

For fixed credentials, time and nonce, each SDK sends its request to a local server and the
spider builds the same request; they must agree on method, path, query, body, the headers
that matter and the signature. A request the official client would not send is a bug. The
SDKs are test-only dependencies (the `contract` extra); the product never imports them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from urllib.parse import parse_qs, parse_qsl, urlsplit

import pytest
from scrapy.settings import Settings

from gpuradar.core.clock import FakeClock
from tests.provider_server import Reply, fixture

FIXED = datetime(2026, 11, 30, 12, 34, 56, tzinfo=UTC)


def spider_for(cls, server, **options):
    spider = cls()
    settings = Settings()
    settings.setmodule("gpuradar.crawler.settings")
    settings.set("GPURADAR_SOURCES", {cls.name: options})
    settings.set("GPURADAR_ENDPOINTS", {f"{cls.name}.{name}": server.base + urlsplit(url).path
                                        for name, url in cls.endpoints.items()})
    spider.settings = settings
    return spider


def header(request, name: str) -> str:
    value = request.headers.get(name)
    return value.decode() if isinstance(value, bytes) else value


def signed_names(authorization: str) -> list[str]:
    return authorization.split("SignedHeaders=")[1].split(",")[0].strip().split(";")


# -- Tencent Cloud (tencentcloud-sdk-python-common + -cvm) -------------------------------------
def test_tencent_zone_config_request_is_the_sdks(monkeypatch, provider_server):
    from tencentcloud.common import abstract_client, credential
    from tencentcloud.common.profile.client_profile import ClientProfile
    from tencentcloud.common.profile.http_profile import HttpProfile
    from tencentcloud.cvm.v20170312 import cvm_client, models

    from gpuradar.crawler.spiders import tencent

    monkeypatch.setattr(abstract_client, "time", SimpleNamespace(time=lambda: FIXED.timestamp()))
    provider_server.route("POST", "/", lambda req: Reply(
        body=b'{"Response": {"InstanceTypeQuotaSet": [], "RequestId": "1"}}'))
    spider = spider_for(tencent.TencentSpider, provider_server, secret_id="AKIDcontract",
                        secret_key="contract-secret")
    spider.clock = FakeClock(FIXED)  # the time it signs with, as the SDK's (patched above)
    ours = next(spider.region_requests("ap-guangzhou"))

    http = HttpProfile(protocol="http", endpoint=provider_server.base.removeprefix("http://"))
    client = cvm_client.CvmClient(credential.Credential("AKIDcontract", "contract-secret"),
                                  "ap-guangzhou", ClientProfile(httpProfile=http))
    sdk_request = models.DescribeZoneInstanceConfigInfosRequest()
    sdk_request.from_json_string(ours.body.decode())
    client.DescribeZoneInstanceConfigInfos(sdk_request)
    [sdk] = provider_server.requests

    assert (ours.method, urlsplit(ours.url).path, urlsplit(ours.url).query) == (
        sdk.method, sdk.path, "")
    assert ours.body == sdk.body  # the signed bytes
    for name in ("Content-Type", "Host", "X-TC-Action", "X-TC-Version", "X-TC-Region",
                 "X-TC-Timestamp", "Authorization"):
        assert header(ours, name) == sdk.headers[name.lower()], name


@pytest.mark.parametrize("region", ["ap-shanghai-fsi", "ap-shenzhen-fsi", "ap-guangzhou"])
def test_tencent_host_of_a_region_is_the_sdks(monkeypatch, region):
    """A financial region is called at its own host: Tencent's CVM "Request Structure" tells
    SDK users to set the endpoint to cvm.<region>.tencentcloudapi.com for it; other regions
    use the SDK's default host, cvm.tencentcloudapi.com. Given that endpoint, the SDK signs
    the same Host, headers and signature as the spider (its request is caught unsent)."""
    from tencentcloud.common import abstract_client, credential
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import (
        TencentCloudSDKException,
    )
    from tencentcloud.common.profile.client_profile import ClientProfile
    from tencentcloud.common.profile.http_profile import HttpProfile
    from tencentcloud.cvm.v20170312 import cvm_client, models

    from gpuradar.crawler.spiders import tencent

    monkeypatch.setattr(abstract_client, "time", SimpleNamespace(time=lambda: FIXED.timestamp()))
    spider = tencent.TencentSpider()
    spider.clock = FakeClock(FIXED)  # the time it signs with, as the SDK's (patched above)
    spider.settings = Settings()
    spider.settings.set("GPURADAR_SOURCES", {"tencent": {"secret_id": "AKIDcontract",
                                                          "secret_key": "contract-secret"}})
    ours = next(spider.region_requests(region))

    financial = region.endswith("-fsi")
    http = HttpProfile(endpoint=f"cvm.{region}.tencentcloudapi.com" if financial else None)
    client = cvm_client.CvmClient(credential.Credential("AKIDcontract", "contract-secret"),
                                  region, ClientProfile(httpProfile=http))

    caught = []

    def catch(req):
        caught.append(req)
        raise ConnectionError("not sent")

    monkeypatch.setattr(client.request, "send_request", catch)
    sdk_request = models.DescribeZoneInstanceConfigInfosRequest()
    sdk_request.from_json_string(ours.body.decode())
    with pytest.raises(TencentCloudSDKException):
        client.DescribeZoneInstanceConfigInfos(sdk_request)
    [sdk] = caught
    assert urlsplit(ours.url).netloc == sdk.header["Host"]
    assert sdk.header["Host"] == (f"cvm.{region}.tencentcloudapi.com" if financial
                                  else "cvm.tencentcloudapi.com")
    assert ours.body == sdk.data.encode()
    for name in ("Content-Type", "Host", "X-TC-Action", "X-TC-Version", "X-TC-Region",
                 "X-TC-Timestamp", "Authorization"):
        assert header(ours, name) == sdk.header[name], name


# -- Huawei Cloud (huaweicloudsdkcore + the ECS and BSS clients) --------------------------------
@pytest.fixture
def huawei_sdk(monkeypatch, provider_server):
    from huaweicloudsdkcore.signer import signer

    from gpuradar.crawler import signing

    class SdkClock(datetime):  # the SDK reads datetime itself
        @classmethod
        def utcnow(cls):
            return FIXED.replace(tzinfo=None)

    monkeypatch.setattr(signer, "datetime", SdkClock)
    monkeypatch.setattr(signing, "SYSTEM", FakeClock(FIXED))  # ours: the clock's default
    provider_server.route("GET", "/v1/0605767b3b00d2c62f05c00b4f1a2c3d/cloudservers/flavors",
                          lambda req: Reply(body=b'{"flavors": []}'))
    provider_server.route("POST", "/v2/bills/ratings/on-demand-resources", lambda req: Reply(
        body=b'{"currency": "CNY", "product_rating_results": []}'))
    provider_server.route("GET", "/v2.1/0605767b3b00d2c62f05c00b4f1a2c3d/os-availability-zone",
                          lambda req: Reply(body=b'{"availabilityZoneInfo": []}'))
    return provider_server


def same_as_huawei_sdk(ours, sdk, credentials) -> None:
    """Method, path, query, body and the headers the SDK adds agree; the SDK also signs its
    User-Agent, so the signature is checked by the SDK's own signer over our request."""
    from huaweicloudsdkcore.sdk_request import SdkRequest
    from huaweicloudsdkcore.signer.signer import Signer

    parts = urlsplit(ours.url)
    assert (ours.method, parts.path, parse_qs(parts.query)) == (sdk.method, sdk.path, sdk.query)
    assert json.loads(ours.body or b"null") == json.loads(sdk.body or b"null")
    ours_signed = signed_names(header(ours, "Authorization"))
    sdk_signed = signed_names(sdk.headers["authorization"])
    assert set(sdk_signed) - set(ours_signed) == {"user-agent"}
    for name in ours_signed:
        assert header(ours, name) == sdk.headers[name], name
    request = SdkRequest(method=ours.method, schema=parts.scheme, host=parts.netloc,
                         resource_path=parts.path, query_params=parse_qsl(parts.query),
                         header_params={n: header(ours, n) for n in ours_signed},
                         body=ours.body)
    assert Signer(credentials).sign(request).header_params["Authorization"] == header(
        ours, "Authorization")


def test_huawei_flavors_request_is_the_sdks(huawei_sdk):
    """Both pages of ListFlavors: the first (`limit`) and the next (`limit` and `marker`, the
    flavor to start after), each a request ListFlavorsRequest can make."""
    from huaweicloudsdkcore.auth.credentials import BasicCredentials
    from huaweicloudsdkecs.v2 import EcsClient, ListFlavorsRequest

    from gpuradar.crawler.spiders.huawei import HuaweiSpider

    project = "0605767b3b00d2c62f05c00b4f1a2c3d"
    credentials = BasicCredentials("AKcontract", "contract-secret", project)
    client = EcsClient.new_builder().with_credentials(credentials).with_endpoint(
        huawei_sdk.base).build()
    client.list_flavors(ListFlavorsRequest(limit=1000))
    client.list_flavors(ListFlavorsRequest(limit=1000, marker="p2s.2xlarge.8"))
    spider = spider_for(HuaweiSpider, huawei_sdk, access_key="AKcontract",
                        secret_key="contract-secret")
    spider.settings.set("GPURADAR_ENDPOINTS", {
        "huawei.ecs": huawei_sdk.base + "/v1/{project_id}/cloudservers/flavors"})
    first = spider.flavors_request("cn-north-4", project)
    same_as_huawei_sdk(first, huawei_sdk.requests[0], credentials)
    following = spider.flavors_request("cn-north-4", project, marker="p2s.2xlarge.8")
    same_as_huawei_sdk(following, huawei_sdk.requests[1], credentials)
    for ours in (first, following):  # no query field the SDK's request model lacks
        assert set(parse_qs(urlsplit(ours.url).query)) <= set(ListFlavorsRequest.attribute_map)


# The SDK marks NovaListAvailabilityZones deprecated (the API reference too: "废弃"), yet it is
# the ECS call that names a region's AZs with their state; docs/sources-china.md says so.
@pytest.mark.filterwarnings("ignore:Method 'nova_list_availability_zones':DeprecationWarning")
def test_huawei_availability_zones_request_is_the_sdks(huawei_sdk):
    from huaweicloudsdkcore.auth.credentials import BasicCredentials
    from huaweicloudsdkecs.v2 import EcsClient, NovaListAvailabilityZonesRequest

    from gpuradar.crawler.spiders.huawei import HuaweiSpider

    project = "0605767b3b00d2c62f05c00b4f1a2c3d"
    credentials = BasicCredentials("AKcontract", "contract-secret", project)
    EcsClient.new_builder().with_credentials(credentials).with_endpoint(
        huawei_sdk.base).build().nova_list_availability_zones(NovaListAvailabilityZonesRequest())
    spider = spider_for(HuaweiSpider, huawei_sdk, access_key="AKcontract",
                        secret_key="contract-secret")
    spider.settings.set("GPURADAR_ENDPOINTS", {
        "huawei.ecs_zones": huawei_sdk.base + "/v2.1/{project_id}/os-availability-zone"})
    ours = spider.zones_request("cn-north-4", project)
    same_as_huawei_sdk(ours, huawei_sdk.requests[0], credentials)


def test_huawei_rating_request_is_the_sdks(huawei_sdk):
    from huaweicloudsdkbss.v2 import (
        BssClient,
        DemandProductInfo,
        ListOnDemandResourceRatingsRequest,
        RateOnDemandReq,
    )
    from huaweicloudsdkcore.auth.credentials import GlobalCredentials

    from gpuradar.crawler.spiders.huawei import HuaweiSpider

    spider = spider_for(HuaweiSpider, huawei_sdk, access_key="AKcontract",
                        secret_key="contract-secret")
    spider.domain_id = "d78cbac186b744899480f25bd022f468"
    ours = spider.rating_request("cn-north-4", "0605767b3b00d2c62f05c00b4f1a2c3d",
                                 [{"id": "p2s.2xlarge.8"}])
    infos = [DemandProductInfo(**info) for info in json.loads(ours.body)["product_infos"]]
    body = RateOnDemandReq(project_id="0605767b3b00d2c62f05c00b4f1a2c3d", inquiry_precision=1,
                           product_infos=infos)
    credentials = GlobalCredentials("AKcontract", "contract-secret", spider.domain_id)
    BssClient.new_builder().with_credentials(credentials).with_endpoint(
        huawei_sdk.base).build().list_on_demand_resource_ratings(
            ListOnDemandResourceRatingsRequest(body=body))
    same_as_huawei_sdk(ours, huawei_sdk.requests[0], credentials)


# -- Alibaba Cloud (alibabacloud-tea-openapi, the ECS client) ----------------------------------
def alibaba_spider_signing_as_the_sdk(monkeypatch, provider_server, answer: str):
    """An Alibaba spider on `provider_server` (answering with the fixture `answer`) that
    signs with the nonce and time the SDK is given too (both patched), so that the two
    requests can be compared byte for byte."""
    from alibabacloud_tea_openapi.utils import Utils

    from gpuradar.crawler import signing
    from gpuradar.crawler.spiders.alibaba import AlibabaSpider

    nonce = "3ee8c1b883d344afa94f4e0ad82fd6cf"
    monkeypatch.setattr(Utils, "get_nonce", staticmethod(lambda: nonce))
    monkeypatch.setattr(Utils, "get_timestamp", staticmethod(
        lambda: FIXED.strftime("%Y-%m-%dT%H:%M:%SZ")))
    monkeypatch.setattr(signing, "uuid", SimpleNamespace(uuid4=lambda: SimpleNamespace(
        hex=nonce)))
    provider_server.route("POST", "/", lambda req: Reply(body=fixture(answer)))
    spider = spider_for(AlibabaSpider, provider_server, access_key_id="LTAIcontract",
                        access_key_secret="contract-secret")
    spider.clock = FakeClock(FIXED)  # the time it signs with, as the SDK's (patched above)
    spider.settings.set("GPURADAR_ENDPOINTS", {"alibaba.api": provider_server.base + "/"})
    return spider


def test_alibaba_describe_price_request_is_the_sdks(monkeypatch, provider_server):
    from alibabacloud_ecs20140526 import models
    from alibabacloud_ecs20140526.client import Client
    from alibabacloud_tea_openapi import models as openapi
    from darabonba.runtime import RuntimeOptions

    spider = alibaba_spider_signing_as_the_sdk(monkeypatch, provider_server,
                                               "alibaba/describe_price_gn7i.json")
    params = {"RegionId": "cn-hangzhou", "ResourceType": "instance",
              "InstanceType": "ecs.gn7i-c8g1.2xlarge", "PriceUnit": "Hour",
              "SystemDisk.Category": "cloud_essd"}
    ours = spider.rpc("DescribePrice", "cn-hangzhou", params, spider.parse_price)

    config = openapi.Config(access_key_id="LTAIcontract", access_key_secret="contract-secret",
                            endpoint=provider_server.base.removeprefix("http://"),
                            protocol="http", signature_algorithm="v2")
    Client(config).describe_price_with_options(models.DescribePriceRequest(
        region_id="cn-hangzhou", resource_type="instance",
        instance_type="ecs.gn7i-c8g1.2xlarge", price_unit="Hour",
        system_disk=models.DescribePriceRequestSystemDisk(category="cloud_essd")),
        RuntimeOptions())
    [sdk] = provider_server.requests
    parts = urlsplit(ours.url)
    assert (ours.method, parts.path) == (sdk.method, sdk.path)
    assert parse_qs(parts.query) == sdk.query  # every parameter, the Signature included
    assert not ours.body and not sdk.body


def test_alibaba_describe_spot_advice_request_is_the_sdks(monkeypatch, provider_server):
    """The spider's DescribeSpotAdvice call (the first batch of a region's spot types, as
    `spot_advice` builds it) is the request the SDK's describe_spot_advice sends for the same
    DescribeSpotAdviceRequest: `InstanceTypes.N` as the SDK flattens the list."""
    from alibabacloud_ecs20140526 import models
    from alibabacloud_ecs20140526.client import Client
    from alibabacloud_tea_openapi import models as openapi
    from darabonba.runtime import RuntimeOptions

    from gpuradar.crawler.spiders.alibaba import SpotAdvice

    spider = alibaba_spider_signing_as_the_sdk(monkeypatch, provider_server,
                                               "alibaba/describe_spot_advice_gn7i.json")
    types = ["ecs.gn7i-c8g1.2xlarge", "ecs.gn7e-c16g1.4xlarge"]
    [ours] = spider.spot_advice("cn-hangzhou", [types], {t: {} for t in types}, {},
                                SpotAdvice())

    config = openapi.Config(access_key_id="LTAIcontract", access_key_secret="contract-secret",
                            endpoint=provider_server.base.removeprefix("http://"),
                            protocol="http", signature_algorithm="v2")
    answer = Client(config).describe_spot_advice_with_options(
        models.DescribeSpotAdviceRequest(region_id="cn-hangzhou", instance_types=types),
        RuntimeOptions())
    [sdk] = provider_server.requests
    parts = urlsplit(ours.url)
    assert (ours.method, parts.path) == (sdk.method, sdk.path)
    assert parse_qs(parts.query) == sdk.query  # every parameter, the Signature included
    assert sdk.query["InstanceTypes.2"] == ["ecs.gn7e-c16g1.4xlarge"]
    # the SDK reads the fixture's answer into its model, every field gpuradar reads kept
    [zone, _] = answer.body.available_spot_zones.available_spot_zone
    [resource] = zone.available_spot_resources.available_spot_resource
    assert (zone.zone_id, resource.instance_type, resource.interrupt_rate_desc,
            resource.interruption_rate, resource.average_spot_discount) == (
        "cn-hangzhou-i", "ecs.gn7i-c8g1.2xlarge", "0-3%", 1.2, 26)


def test_alibaba_throttled_call_is_retried_as_the_sdk_would_send_it(monkeypatch, provider_server):
    """Alibaba's documented throttling answer (HTTP 403, Code Throttling.User): the SDK reads
    it as that error; the backoff middleware, told by the spider that it is throttling,
    retries the call, and the retry is the SDK's request for the same call with a new
    SignatureNonce (a reused nonce is refused)."""
    import asyncio

    from alibabacloud_ecs20140526 import models
    from alibabacloud_ecs20140526.client import Client
    from alibabacloud_tea_openapi import models as openapi
    from alibabacloud_tea_openapi.utils import Utils
    from darabonba.runtime import RuntimeOptions
    from scrapy.http import TextResponse
    from scrapy.utils.test import get_crawler

    from gpuradar.crawler import signing
    from gpuradar.crawler.middlewares import BackoffRetryMiddleware
    from gpuradar.crawler.spiders.alibaba import AlibabaSpider

    nonces = iter(["3ee8c1b883d344afa94f4e0ad82fd6cf", "9b2d0c1f5e7a4b3c8d6e2f1a0b9c8d7e"])
    current = {}

    def next_nonce():
        current["nonce"] = next(nonces)
        return SimpleNamespace(hex=current["nonce"])

    monkeypatch.setattr(signing, "uuid", SimpleNamespace(uuid4=next_nonce))
    monkeypatch.setattr(Utils, "get_nonce", staticmethod(lambda: current["nonce"]))
    monkeypatch.setattr(Utils, "get_timestamp", staticmethod(
        lambda: FIXED.strftime("%Y-%m-%dT%H:%M:%SZ")))

    throttled = fixture("alibaba/error_throttling_user.json")
    provider_server.route("POST", "/", lambda req: Reply(403, throttled))
    crawler = get_crawler(AlibabaSpider, {"RETRY_TIMES": 1, "RETRY_BACKOFF_MAX": 0.01})
    crawler.spider = spider = spider_for(AlibabaSpider, provider_server,
                                         access_key_id="LTAIcontract",
                                         access_key_secret="contract-secret")
    spider.clock = FakeClock(FIXED)
    spider.crawler = crawler
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(slots={}))  # no crawl running
    spider.settings.set("GPURADAR_ENDPOINTS", {"alibaba.api": provider_server.base + "/"})
    spider.settings.set("RETRY_BACKOFF_MAX", 0.01)  # the pause until the next minute, capped
    params = {"RegionId": "cn-hangzhou", "ResourceType": "instance",
              "InstanceType": "ecs.gn7i-c8g1.2xlarge", "PriceUnit": "Hour",
              "SystemDisk.Category": "cloud_essd"}
    first = spider.rpc("DescribePrice", "cn-hangzhou", params, spider.parse_price)
    answer = TextResponse(first.url, status=403, body=throttled, request=first)
    retry = asyncio.run(BackoffRetryMiddleware.from_crawler(crawler).process_response(
        first, answer))
    assert retry is not answer and retry.meta["retry_times"] == 1

    config = openapi.Config(access_key_id="LTAIcontract", access_key_secret="contract-secret",
                            endpoint=provider_server.base.removeprefix("http://"),
                            protocol="http", signature_algorithm="v2")
    with pytest.raises(Exception) as raised:  # the SDK's own reading of the answer
        Client(config).describe_price_with_options(models.DescribePriceRequest(
            region_id="cn-hangzhou", resource_type="instance",
            instance_type="ecs.gn7i-c8g1.2xlarge", price_unit="Hour",
            system_disk=models.DescribePriceRequestSystemDisk(category="cloud_essd")),
            RuntimeOptions(autoretry=False))
    assert (raised.value.code, raised.value.status_code) == ("Throttling.User", 403)
    [sdk] = provider_server.requests  # signed with the second nonce, as the retry is
    query = parse_qs(urlsplit(retry.url).query)
    assert query == sdk.query
    assert query["SignatureNonce"] != parse_qs(urlsplit(first.url).query)["SignatureNonce"]


# -- AWS (botocore) ---------------------------------------------------------------------------
def test_aws_spot_history_request_is_botocores(monkeypatch, provider_server):
    import botocore.auth
    import botocore.session
    from botocore.credentials import Credentials

    from gpuradar.crawler.spiders.aws import AwsSpider

    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: FIXED.replace(
        tzinfo=None))
    provider_server.route("POST", "/", lambda req: Reply(
        body=fixture("aws/spot_history_us-west-2.xml"), content_type="text/xml"))
    spider = spider_for(AwsSpider, provider_server, access_key_id="AKIACONTRACT",
                        secret_access_key="contract-secret")
    spider.settings.set("GPURADAR_ENDPOINTS", {"aws.ec2": provider_server.base + "/"})
    spider.aws_credentials = Credentials(
        "AKIACONTRACT", "contract-secret").get_frozen_credentials()
    ours = spider.spot_history_request("us-west-2")
    params = dict(parse_qsl(ours.body.decode()))

    client = botocore.session.get_session().create_client(
        "ec2", region_name="us-west-2", endpoint_url=provider_server.base,
        aws_access_key_id="AKIACONTRACT", aws_secret_access_key="contract-secret")
    types = [params[f"InstanceType.{i}"] for i in range(1, 1 + sum(
        k.startswith("InstanceType.") for k in params))]
    client.describe_spot_price_history(
        ProductDescriptions=[params["ProductDescription.1"]],
        StartTime=datetime.strptime(params["StartTime"], "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=UTC), MaxResults=int(params["MaxResults"]), InstanceTypes=types)
    [sdk] = provider_server.requests
    assert (ours.method, urlsplit(ours.url).path) == (sdk.method, sdk.path)
    assert params == dict(parse_qsl(sdk.body.decode()))
    assert signed_names(header(ours, "Authorization")) == signed_names(
        sdk.headers["authorization"])
    assert ours.body == sdk.body  # the same bytes: the same signature
    assert header(ours, "Authorization") == sdk.headers["authorization"]


# -- Azure (azure-identity through MSAL, azure-mgmt-compute) ----------------------------------
def test_azure_token_and_resource_skus_requests_are_the_sdks(provider_server):
    """ClientSecretCredential and ComputeManagementClient.resource_skus.list() send their
    requests to the loopback server (a requests session that keeps the path and query and
    changes only the host, so the SDKs still see login.microsoftonline.com and
    management.azure.com); the spider's token and SKU requests must be the same. The tenant
    is the one of the recorded OpenID configuration MSAL reads first."""
    import asyncio

    import requests
    from azure.core.pipeline.transport import RequestsTransport
    from azure.identity import ClientSecretCredential
    from azure.mgmt.compute import ComputeManagementClient
    from scrapy.http import TextResponse

    from gpuradar.crawler.spiders.azure import AzureSpider

    tenant = "88888888-8888-8888-8888-888888888888"
    token_path = f"/{tenant}/oauth2/v2.0/token"
    skus_path = "/subscriptions/sub-0003/providers/Microsoft.Compute/skus"
    provider_server.route("GET", f"/{tenant}/v2.0/.well-known/openid-configuration",
                          lambda req: Reply(body=fixture("azure/openid_configuration_real.json")))
    token = json.loads(fixture("azure/token_real.json"))
    provider_server.route("POST", token_path, lambda req: Reply(body=json.dumps(token).encode()))
    provider_server.route("GET", skus_path, lambda req: Reply(
        body=fixture("azure/resource_skus_southcentralus_real.json")))

    class Loopback(requests.Session):
        def request(self, method, url, *args, **kwargs):
            parts = urlsplit(url)
            local = provider_server.base + parts.path + (f"?{parts.query}" if parts.query else "")
            return super().request(method, local, *args, **kwargs)

    transport = RequestsTransport(session=Loopback(), session_owner=False)
    credential = ClientSecretCredential(tenant, "client-0002", "cs-secret-5a4b3c2d1e",
                                        transport=transport)
    client = ComputeManagementClient(credential, "sub-0003", transport=transport)
    listed = [sku.name for sku in client.resource_skus.list()]
    assert listed == ["Standard_D2as_v6", "Standard_NC16as_T4_v3", "Standard_NC24ads_A100_v4"]
    sdk_token = next(r for r in provider_server.requests if r.path == token_path)
    sdk_skus = next(r for r in provider_server.requests if r.path == skus_path)

    spider = spider_for(AzureSpider, provider_server, tenant_id=tenant, client_id="client-0002",
                        client_secret="cs-secret-5a4b3c2d1e", subscription_id="sub-0003")

    async def starts():
        return [r async for r in spider.start()]

    [_, ours] = asyncio.run(starts())
    assert (ours.method, urlsplit(ours.url).path) == (sdk_token.method, sdk_token.path)
    assert header(ours, "Content-Type") == sdk_token.headers["content-type"]
    form, sdk_form = dict(parse_qsl(ours.body.decode())), dict(parse_qsl(sdk_token.body.decode()))
    # MSAL adds `client_info=1`, its own extension (the user's identity in a user flow);
    # Microsoft's protocol page asks for exactly these four.
    assert sdk_form.pop("client_info") == "1"
    assert form == sdk_form
    [skus, _] = spider.parse_token(TextResponse(ours.url, body=json.dumps(token).encode(),
                                                encoding="utf-8"))
    assert (skus.method, urlsplit(skus.url).path) == (sdk_skus.method, sdk_skus.path)
    assert parse_qs(urlsplit(skus.url).query) == sdk_skus.query == {"api-version": ["2021-07-01"]}
    for name in ("Authorization", "Accept"):
        assert header(skus, name) == sdk_skus.headers[name.lower()], name


def test_azure_eviction_query_is_the_resource_graph_sdks(provider_server):
    """ResourceGraphClient.resources (azure-mgmt-resourcegraph) with the spider's query and
    options sends its POST to the loopback server; the spider's request is the same (path,
    api-version, JSON body, bearer token), and the SDK reads the fixture's answer as a
    QueryResponse with the rows gpuradar reads."""
    import asyncio

    import requests
    from azure.core.pipeline.transport import RequestsTransport
    from azure.identity import ClientSecretCredential
    from azure.mgmt.resourcegraph import ResourceGraphClient
    from azure.mgmt.resourcegraph.models import QueryRequest, QueryRequestOptions
    from scrapy.http import TextResponse

    from gpuradar.crawler.spiders.azure import EVICTION_PAGE, EVICTION_QUERY, AzureSpider

    tenant = "88888888-8888-8888-8888-888888888888"
    graph_path = "/providers/Microsoft.ResourceGraph/resources"
    provider_server.route("GET", f"/{tenant}/v2.0/.well-known/openid-configuration",
                          lambda req: Reply(body=fixture("azure/openid_configuration_real.json")))
    token = json.loads(fixture("azure/token_real.json"))
    provider_server.route("POST", f"/{tenant}/oauth2/v2.0/token",
                          lambda req: Reply(body=json.dumps(token).encode()))
    provider_server.route("POST", graph_path, lambda req: Reply(
        body=fixture("azure/resource_graph_spot_eviction_rates.json")))

    class Loopback(requests.Session):
        def request(self, method, url, *args, **kwargs):
            parts = urlsplit(url)
            local = provider_server.base + parts.path + (f"?{parts.query}" if parts.query else "")
            return super().request(method, local, *args, **kwargs)

    transport = RequestsTransport(session=Loopback(), session_owner=False)
    credential = ClientSecretCredential(tenant, "client-0002", "cs-secret-5a4b3c2d1e",
                                        transport=transport)
    client = ResourceGraphClient(credential, transport=transport)
    answer = client.resources(QueryRequest(query=EVICTION_QUERY, options=QueryRequestOptions(
        result_format="objectArray", top=EVICTION_PAGE)))
    assert [row["evictionRate"] for row in answer.data] == ["0-5", "10-15", "20+", "5-10"]
    assert answer.skip_token is None and answer.result_truncated == "false"
    sdk = next(r for r in provider_server.requests if r.path == graph_path)

    spider = spider_for(AzureSpider, provider_server, tenant_id=tenant, client_id="client-0002",
                        client_secret="cs-secret-5a4b3c2d1e", subscription_id="sub-0003")

    async def starts():
        return [r async for r in spider.start()]

    [_, token_request] = asyncio.run(starts())
    [_, ours] = spider.parse_token(TextResponse(token_request.url,
                                                body=json.dumps(token).encode(),
                                                encoding="utf-8"))
    assert (ours.method, urlsplit(ours.url).path) == (sdk.method, sdk.path)
    assert parse_qs(urlsplit(ours.url).query) == sdk.query == {"api-version": ["2021-03-01"]}
    assert json.loads(ours.body) == json.loads(sdk.body)
    assert header(ours, "Authorization") == sdk.headers["authorization"]
    assert header(ours, "Content-Type") == sdk.headers["content-type"]
