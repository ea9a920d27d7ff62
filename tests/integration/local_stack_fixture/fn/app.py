"""A stand-in function for testing the local stack harness itself."""

import os


class KubeUnavailable(Exception):
    pass


def handler(event, context):
    if event.get("explode"):
        raise KubeUnavailable("the API server is down")
    return {"seen": event, "table": os.environ.get("TABLE"), "function": context.function_name}
