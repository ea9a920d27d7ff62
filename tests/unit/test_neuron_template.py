"""A Neuron group's template offers what the Neuron device plugin registers: ``aws.amazon.com/neuron``
(whole devices) and ``aws.amazon.com/neuroncore`` (their cores).

The AWS Neuron documentation ("Kubernetes environment setup for Neuron", the device plugin section) names
the two resources the plugin registers, and most Neuron workloads ask for cores. EC2's
DescribeInstanceTypes gives each type's ``NeuronInfo.NeuronDevices[].Count`` and ``CoreInfo.Count`` (cores
per device); Karpenter's AWS provider offers the product as the type's neuroncore capacity
(``pkg/providers/instancetype/types.go``). A template without it had no room for a pod asking for cores,
so a Neuron group at zero was never scaled up for one.
"""

from __future__ import annotations

from plan_world import World, pending_codes, scale_up

from spillway.model.aws import bundled_instance_types
from spillway.model.nodegroup import type_resources
from spillway.model.resources import NEURON, NEURON_CORE

CATALOGUE = bundled_instance_types()


def test_the_type_offers_its_devices_and_their_cores() -> None:
    """inf2.xlarge: one Inferentia2 of 2 cores; trn1.32xlarge: 16 Trainium of 2 cores."""
    inf2 = type_resources(CATALOGUE["inf2.xlarge"], {})[0]
    trn1 = type_resources(CATALOGUE["trn1.32xlarge"], {})[0]
    gpu = type_resources(CATALOGUE["g5.xlarge"], {})[0]

    assert (inf2[NEURON], inf2[NEURON_CORE]) == (1000, 2000)
    assert (trn1[NEURON], trn1[NEURON_CORE]) == (16_000, 32_000)
    assert NEURON not in gpu and NEURON_CORE not in gpu


def neuron_pods(w: World, prefix: str, count: int, resource: str, amount: int) -> list[str]:
    names = w.pods(prefix, count, cpu="1", memory="2Gi")
    for item in w.items[-count:]:
        item["spec"]["containers"][0]["resources"]["limits"] = {resource: str(amount)}
    return names


def test_a_pod_asking_for_cores_gets_a_node_of_a_neuron_group_at_zero() -> None:
    w = World()
    w.group("inf", "inf2.xlarge")
    neuron_pods(w, "serve", 2, NEURON_CORE, 1)  # one core each: both on one node of 2 cores
    neuron_pods(w, "big", 1, NEURON_CORE, 4)  # more cores than an inf2.xlarge has

    result = w.plan()

    assert scale_up(result) == {"inf": (0, 1, ["default/serve-0", "default/serve-1"])}
    assert "default/big-0" in pending_codes(result), pending_codes(result)
