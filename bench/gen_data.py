"""Deterministic benchmark data, written as CSV.

devops: TSBS-like cpu-only data: 100 hosts x 3 days at 10 s; 10 host tags as
        text; 10 usage_* metrics as clamped random walks of whole numbers 0-100
        stored as float8 (steps of -2..2: about 2.3 bits of entropy per value).
sensor: 100 sensors x 3 days at 10 s; temperature, humidity, pressure as
        random walks rounded to 0.1.
Rows come in time order, all series interleaved, as a collector would send them."""

import argparse
import datetime as dt
import random

TAGS = ["hostname", "region", "datacenter", "rack", "os", "arch", "team", "service", "service_version",
        "service_environment"]
METRICS = ["usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq",
           "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"]
REGIONS = ["us-east-1", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1",
           "ap-southeast-2", "ap-northeast-1", "sa-east-1"]


def host_tags(rng, h):
    region = rng.choice(REGIONS)
    return [f"host_{h}", region, f"{region}{rng.choice('abc')}", str(rng.randrange(100)),
            rng.choice(["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"]), rng.choice(["x64", "x86"]),
            rng.choice(["SF", "NYC", "LON", "CHI"]), str(rng.randrange(20)), str(rng.randrange(2)),
            rng.choice(["production", "staging", "test"])]


def devops(out, hosts, days, step_s, seed):
    rng = random.Random(seed)
    tags = [",".join(host_tags(rng, h)) for h in range(hosts)]
    state = [[rng.randrange(101) for _ in METRICS] for _ in range(hosts)]
    start = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    steps = days * 86400 // step_s
    for s in range(steps):
        ts = (start + dt.timedelta(seconds=s * step_s)).strftime("%Y-%m-%d %H:%M:%S+00")
        for h in range(hosts):
            vals = state[h]
            for i in range(len(vals)):
                vals[i] = min(100, max(0, vals[i] + rng.randrange(-2, 3)))
            out.write(f"{ts},{tags[h]},{','.join(map(str, vals))}\n")


def sensor(out, sensors, days, step_s, seed):
    rng = random.Random(seed)
    state = [[rng.randrange(150, 300), rng.randrange(300, 700), rng.randrange(9900, 10300)] for _ in range(sensors)]
    start = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    for s in range(days * 86400 // step_s):
        ts = (start + dt.timedelta(seconds=s * step_s)).strftime("%Y-%m-%d %H:%M:%S+00")
        for i in range(sensors):
            v = state[i]
            v[0] += rng.randrange(-3, 4)
            v[1] = min(1000, max(0, v[1] + rng.randrange(-5, 6)))
            v[2] += rng.randrange(-2, 3)
            out.write(f"{ts},sensor_{i},{v[0] / 10},{v[1] / 10},{v[2] / 10}\n")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("dataset", choices=["devops", "sensor"])
    p.add_argument("path")
    p.add_argument("--series", type=int, default=100)
    p.add_argument("--days", type=int, default=3)
    p.add_argument("--step", type=int, default=10)
    a = p.parse_args()
    with open(a.path, "w", buffering=1 << 20) as f:
        (devops if a.dataset == "devops" else sensor)(f, a.series, a.days, a.step, 42)
