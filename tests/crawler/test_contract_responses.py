"""Response contracts: every field a spider reads exists in the provider's own SDK response
model, with a type the spider accepts (issue #15).

The SDKs (the `contract` extra; the product never imports them) are walked by their own
metadata: Alibaba's Darabonba models (from_map / __init__ annotations), Tencent's models
(properties documented with `:rtype:`), Huawei's (`openapi_types` / `attribute_map`), the
Lambda Cloud API client (attrs classes generated from Lambda's OpenAPI document) and Vast.ai's
`Offer` dataclass. A field a spider reads that a model lacks must be listed in OUTSIDE_SDK with
the provider's own document that defines it, and be read with a fallback.
"""

from __future__ import annotations

import dataclasses
import decimal
import inspect
import re
import typing

import pytest

NUMBER = (int, float)
LEAF = {"str": str, "int": int, "float": float, "bool": bool, "decimal.Decimal": decimal.Decimal}


def accepts(expected: tuple[type, ...], sdk_type: type) -> bool:
    if sdk_type is decimal.Decimal or sdk_type is float:  # a JSON number
        return float in expected
    if sdk_type is int:
        return int in expected
    return sdk_type in expected


# -- Alibaba: alibabacloud-ecs20140526 (Darabonba models) ---------------------------------------
def alibaba_field(model: type, key: str) -> str:
    """The annotation of the attribute `from_map` fills from JSON key `key`."""
    params = inspect.signature(model.__init__).parameters
    for probe in ("probe", {}, []):
        try:
            obj = model().from_map({key: probe})
        except Exception:  # noqa: BLE001 - a nested model refuses a scalar probe
            continue
        for name in params:
            value = getattr(obj, name, None)
            if value is probe or (value is not None and not isinstance(probe, str)
                                  and name != "self" and value != model().__dict__.get(name)):
                return str(params[name].annotation)
    raise AssertionError(f"{model.__name__} has no field {key!r}")


def alibaba_walk(root: type, path: str) -> type:
    from alibabacloud_ecs20140526 import models

    model: type = root
    for key in path.split("."):
        annotation = alibaba_field(model, key.removesuffix("[]"))
        inner = re.sub(r"^List\[(.*)\]$", r"\1", annotation).removeprefix("main_models.")
        if inner in LEAF:
            return LEAF[inner]
        model = getattr(models, inner)
    return model


ALIBABA = {  # response model -> field path -> the types the spider accepts
    "DescribeInstanceTypesResponseBody": {
        "InstanceTypes.InstanceType[].InstanceTypeId": (str,),
        "InstanceTypes.InstanceType[].GPUAmount": NUMBER,
        "InstanceTypes.InstanceType[].GPUSpec": (str,),
        "InstanceTypes.InstanceType[].GPUMemorySize": NUMBER,
        "InstanceTypes.InstanceType[].CpuCoreCount": NUMBER,
        "InstanceTypes.InstanceType[].MemorySize": NUMBER,
        "NextToken": (str,),
    },
    "DescribeAvailableResourceResponseBody": {
        "AvailableZones.AvailableZone[].ZoneId": (str,),
        "AvailableZones.AvailableZone[].AvailableResources.AvailableResource[]"
        ".SupportedResources.SupportedResource[].Value": (str,),
        "AvailableZones.AvailableZone[].AvailableResources.AvailableResource[]"
        ".SupportedResources.SupportedResource[].Status": (str,),
        "AvailableZones.AvailableZone[].AvailableResources.AvailableResource[]"
        ".SupportedResources.SupportedResource[].StatusCategory": (str,),
    },
    "DescribePriceResponseBody": {
        "PriceInfo.Price.Currency": (str,),
        "PriceInfo.Price.OriginalPrice": NUMBER,
        "PriceInfo.Price.DetailInfos.DetailInfo[].Resource": (str,),
        "PriceInfo.Price.DetailInfos.DetailInfo[].OriginalPrice": (int, float, str),
        "PriceInfo.Price.DetailInfos.DetailInfo[].TradePrice": (int, float, str),
    },
    "DescribeSpotAdviceResponseBody": {
        "AvailableSpotZones.AvailableSpotZone[].ZoneId": (str,),
        "AvailableSpotZones.AvailableSpotZone[].AvailableSpotResources"
        ".AvailableSpotResource[].InstanceType": (str,),
        "AvailableSpotZones.AvailableSpotZone[].AvailableSpotResources"
        ".AvailableSpotResource[].InterruptRateDesc": (str,),
        "AvailableSpotZones.AvailableSpotZone[].AvailableSpotResources"
        ".AvailableSpotResource[].InterruptionRate": NUMBER,
        "AvailableSpotZones.AvailableSpotZone[].AvailableSpotResources"
        ".AvailableSpotResource[].AverageSpotDiscount": NUMBER,
    },
    "DescribeSpotPriceHistoryResponseBody": {
        "Currency": (str,),
        "SpotPrices.SpotPriceType[].ZoneId": (str,),
        "SpotPrices.SpotPriceType[].Timestamp": (str,),
        "SpotPrices.SpotPriceType[].NetworkType": (str,),
        "SpotPrices.SpotPriceType[].SpotPrice": NUMBER,
        "SpotPrices.SpotPriceType[].OriginPrice": NUMBER,
    },
}


@pytest.mark.parametrize(("model", "path"), [(m, p) for m, fields in ALIBABA.items()
                                             for p in fields])
def test_alibaba_fields_exist_in_the_ecs_sdk(model, path):
    from alibabacloud_ecs20140526 import models

    sdk_type = alibaba_walk(getattr(models, model), path)
    assert accepts(ALIBABA[model][path], sdk_type), (path, sdk_type)


# -- Tencent: tencentcloud-sdk-python-cvm --------------------------------------------------------
def tencent_walk(root: str, path: str) -> type:
    from tencentcloud.cvm.v20170312 import models

    model = getattr(models, root)
    for key in path.split("."):
        prop = vars(model).get(key.removesuffix("[]"))
        assert isinstance(prop, property), f"{model.__name__} has no field {key!r}"
        rtype = re.search(r":rtype:\s*(.+)", prop.__doc__ or "").group(1).strip()
        nested = re.search(r"models\.(\w+)`|list of (\w+)", rtype)
        if nested:
            model = getattr(models, nested.group(1) or nested.group(2))
            continue
        return LEAF[rtype]
    return model


TENCENT = {
    "DescribeRegionsResponse": {"RegionSet[].Region": (str,), "RegionSet[].RegionState": (str,)},
    "DescribeZoneInstanceConfigInfosResponse": {
        f"InstanceTypeQuotaSet[].{field}": kinds for field, kinds in {
            "Zone": (str,), "InstanceType": (str,), "InstanceChargeType": (str,),
            "InstanceFamily": (str,), "TypeName": (str,), "Status": (str,),
            "SoldOutReason": (str,), "CpuType": (str,), "Cpu": NUMBER, "Memory": NUMBER,
            "Gpu": NUMBER, "GpuCount": NUMBER, "Price.UnitPrice": NUMBER,
            "Price.UnitPriceDiscount": NUMBER, "Price.ChargeUnit": (str,),
            "Price.UnitPriceSecondStep": NUMBER, "Price.UnitPriceThirdStep": NUMBER,
        }.items()},
}


@pytest.mark.parametrize(("model", "path"), [(m, p) for m, fields in TENCENT.items()
                                             for p in fields])
def test_tencent_fields_exist_in_the_cvm_sdk(model, path):
    sdk_type = tencent_walk(model, path)
    assert accepts(TENCENT[model][path], sdk_type), (path, sdk_type)


def test_tencent_answer_names_no_gpu_model():
    """The quota item has no GPU model field (Externals has none either): the spider takes
    the GPU from the instance family, never from an undocumented field."""
    from tencentcloud.cvm.v20170312 import models

    fields = {n for n, v in vars(models.Externals).items() if isinstance(v, property)}
    assert "GPUDesc" not in fields


# -- Huawei: huaweicloudsdkecs, huaweicloudsdkbss --------------------------------------------------
def huawei_walk(root: type, path: str, package) -> type:
    model = root
    for key in path.split("."):
        key = key.removesuffix("[]")
        reverse = {json: attr for attr, json in model.attribute_map.items()}
        assert key in reverse, f"{model.__name__} has no field {key!r}"
        kind = re.sub(r"^list\[(.*)\]$", r"\1", model.openapi_types[reverse[key]])
        if kind in LEAF:
            return LEAF[kind]
        model = getattr(package, kind)
    return model


HUAWEI_ECS = {
    "ListFlavorsResponse": {
        f"flavors[].{field}": kinds for field, kinds in {
            "id": (str,), "vcpus": (str, int), "ram": NUMBER, "links": (list,),
            "os_extra_specs.ecs:performancetype": (str,),
            "os_extra_specs.info:gpus": (str,),
            "os_extra_specs.info:asic_accelerators": (str,),
            "os_extra_specs.pci_passthrough:alias": (str,),
            "os_extra_specs.cond:operation:az": (str,),
            "os_extra_specs.cond:operation:status": (str,),
            "os_extra_specs.cond:spot:operation:az": (str,),
            "os_extra_specs.info:cpu:name": (str,),
        }.items()},
    # The region's AZs, for the AZs a flavor does not list (crawler/spiders/huawei.py).
    "NovaListAvailabilityZonesResponse": {
        "availabilityZoneInfo[].zoneName": (str,),
        "availabilityZoneInfo[].zoneState.available": (bool,),
    },
}
HUAWEI_BSS = {
    "ListOnDemandResourceRatingsResponse": {
        "currency": (str,), "official_website_amount": NUMBER,
        "product_rating_results[].id": (str,),
        "product_rating_results[].official_website_amount": NUMBER,
        "product_rating_results[].amount": NUMBER,
    },
}


@pytest.mark.parametrize(("model", "path"), [(m, p) for m, fields in HUAWEI_ECS.items()
                                             for p in fields])
def test_huawei_flavor_fields_exist_in_the_ecs_sdk(model, path):
    from huaweicloudsdkecs import v2

    sdk_type = huawei_walk(getattr(v2, model), path, v2)
    if sdk_type in (list,) or isinstance(sdk_type, type) and sdk_type.__module__.startswith(
            "huaweicloudsdkecs"):
        return  # a nested model or list: present is all the spider needs
    assert accepts(HUAWEI_ECS[model][path], sdk_type), (path, sdk_type)


@pytest.mark.parametrize(("model", "path"), [(m, p) for m, fields in HUAWEI_BSS.items()
                                             for p in fields])
def test_huawei_rating_fields_exist_in_the_bss_sdk(model, path):
    from huaweicloudsdkbss import v2

    sdk_type = huawei_walk(getattr(v2, model), path, v2)
    assert accepts(HUAWEI_BSS[model][path], sdk_type), (path, sdk_type)


# -- Lambda: lambda-cloud-api-client (generated from Lambda's OpenAPI document) ------------------
LAMBDA = {
    "InstanceType": {"name": (str,), "description": (str,), "gpu_description": (str,),
                     "price_cents_per_hour": (int, float, str)},
    "InstanceTypeSpecs": {"vcpus": NUMBER, "memory_gib": NUMBER, "storage_gib": NUMBER,
                          "gpus": NUMBER},
    "Region": {"name": (str,)},
}


@pytest.mark.parametrize(("model", "field"), [(m, f) for m, fields in LAMBDA.items()
                                              for f in fields])
def test_lambda_fields_exist_in_the_cloud_api_client(model, field):
    from lambda_cloud_api_client import models

    hints = vars(getattr(models, model)).get("__annotations__", {})
    assert field in hints, f"{model} has no field {field!r}"
    kind = LEAF.get(hints[field], hints[field]) if isinstance(hints[field], str) else hints[field]
    assert accepts(LAMBDA[model][field], kind), (field, kind)


# -- Vast.ai: vastai (the official CLI/SDK's Offer dataclass) ------------------------------------
VASTAI = {"id": NUMBER, "ask_contract_id": NUMBER, "machine_id": (int,), "gpu_name": (str,),
          "num_gpus": NUMBER, "dph_total": NUMBER, "dph_base": NUMBER, "min_bid": NUMBER,
          "gpu_ram": NUMBER, "geolocation": (str,), "cpu_cores": NUMBER,
          "cpu_cores_effective": NUMBER, "cpu_ram": NUMBER, "reliability": NUMBER,
          "verification": (str,), "hosting_type": NUMBER}


@pytest.mark.parametrize("field", sorted(VASTAI))
def test_vastai_fields_exist_in_the_offer_model(field):
    from vastai.data.offer import Offer

    fields = {f.name: f.type for f in dataclasses.fields(Offer)}
    assert field in fields, f"Offer has no field {field!r}"
    kinds = [a for a in typing.get_args(fields[field]) if a is not type(None)] or [fields[field]]
    assert any(accepts(VASTAI[field], kind) for kind in kinds), (field, fields[field])


# -- fields read beyond the SDK models, each with the provider document defining it -------------
OUTSIDE_SDK = {
    ("vastai", "reliability2"): "Vast's search-offers API reference (vast-ai/docs "
    "search_offers.yaml) and the real capture; `reliability` (in the model) is the fallback",
    ("vastai", "search.diskHour"): "the same reference; dph_total - dph_base is the fallback",
    ("huawei", "os_extra_specs.cond:spot_block:operation:az"): "Huawei's ECS API doc example "
    "(flavor spot availability); cond:spot:operation:az (in the model) is the fallback",
    ("lambda", "data.<name>.regions_with_capacity_available"): "Lambda's OpenAPI document "
    "(instance-types answer); the generated client leaves that envelope unparsed",
}


def test_fields_outside_the_sdks_are_few_and_sourced():
    from gpuradar.crawler.spiders import huawei, vastai

    assert '"reliability2", offer.get("reliability")' in inspect.getsource(vastai)
    assert 'or specs.get("cond:spot:operation:az")' in inspect.getsource(huawei)
    assert all(len(why) > 40 for why in OUTSIDE_SDK.values())
