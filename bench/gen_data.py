"""Deterministic benchmark data, written as CSV.

devops: TSBS-like cpu-only data: 100 hosts x 3 days at 10 s; 10 host tags as
        text; 10 usage_* metrics as clamped random walks of whole numbers 0-100
        stored as float8 (steps of -2..2: about 2.3 bits of entropy per value).
sensor: 100 sensors x 3 days at 10 s; temperature, humidity, pressure as
        random walks rounded to 0.1.
iot:    trucks after TSBS's IoT generator (pkg/data/usecases/iot, its Go
        source): per 10 s, fuel_consumption (clamped walk, step U(-5, 5),
        0-50, truncated to 1 decimal), velocity (step U(-10, 10), 0-100,
        whole), grade (step U(-5, 5), 0-100, whole), temperature (step
        U(-0.5, 0.5), -20..45, truncated to 2 decimals), fuel_state (down by
        U(0, 0.001) a tick, refuelled at 0, 1 decimal); an odometer (int8
        counter: the distance at that velocity), moving (bool: velocity > 0),
        status (text, 4 values, changes with probability 0.002 a tick); as
        TSBS, about one row in ten has one field NULL, and truck tags (fleet,
        model) are columns of constant value.
float:  100 series x 3 columns of full-precision float8 random walks
        (steps U(-0.5, 0.5) from about 100: some 46 bits of entropy a value).
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


FLEETS = ["East", "West", "North", "South"]
MODELS = ["F-150", "G-2000", "H-2"]
STATUS = ["driving", "idle", "loading", "maintenance"]
IOT_FIELDS = ["fuel_consumption", "velocity", "grade", "temperature", "fuel_state", "odometer", "moving", "status"]


def trunc(x, digits):
    """TSBS's FloatPrecision: float64(int(x * 10^p)) / 10^p (truncated, not rounded)."""
    scale = 10 ** digits
    return int(x * scale) / scale


def iot(out, trucks, days, step_s, seed):
    rng = random.Random(seed)
    tags = [f"truck_{t},{rng.choice(FLEETS)},{rng.choice(MODELS)}" for t in range(trucks)]
    # fuel_consumption, velocity, grade, temperature, fuel_state, odometer (m), status
    state = [[25.0, 0.0, 0.0, rng.uniform(5, 25), 1.0, 0, rng.randrange(4)] for _ in range(trucks)]
    start = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    for s in range(days * 86400 // step_s):
        ts = (start + dt.timedelta(seconds=s * step_s)).strftime("%Y-%m-%d %H:%M:%S+00")
        for t in range(trucks):
            v = state[t]
            v[0] = min(50.0, max(0.0, v[0] + rng.uniform(-5, 5)))
            v[1] = min(100.0, max(0.0, v[1] + rng.uniform(-10, 10)))
            v[2] = min(100.0, max(0.0, v[2] + rng.uniform(-5, 5)))
            v[3] = min(45.0, max(-20.0, v[3] + rng.uniform(-0.5, 0.5)))
            v[4] = max(0.0, v[4] - rng.uniform(0, 0.001))
            if v[4] == 0.0:
                v[4] = 1.0
            v[5] += int(v[1] / 3.6 * step_s)
            if rng.random() < 0.002:
                v[6] = rng.randrange(4)
            fields = [str(trunc(v[0], 1)), str(trunc(v[1], 0)), str(trunc(v[2], 0)), str(trunc(v[3], 2)),
                      str(trunc(v[4], 1)), str(v[5]), "t" if trunc(v[1], 0) > 0 else "f", STATUS[v[6]]]
            # As TSBS: about one row in ten has one field NULL (an empty CSV cell).
            if rng.random() < 0.1:
                fields[rng.randrange(len(fields))] = ""
            out.write(f"{ts},{tags[t]},{','.join(fields)}\n")


def floatwalk(out, series, days, step_s, seed):
    rng = random.Random(seed)
    state = [[100.0 + rng.uniform(-1, 1) for _ in range(3)] for _ in range(series)]
    start = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    for s in range(days * 86400 // step_s):
        ts = (start + dt.timedelta(seconds=s * step_s)).strftime("%Y-%m-%d %H:%M:%S+00")
        for i in range(series):
            v = state[i]
            for k in range(3):
                v[k] += rng.uniform(-0.5, 0.5)
            out.write(f"{ts},series_{i},{v[0]!r},{v[1]!r},{v[2]!r}\n")


GENERATORS = {"devops": devops, "sensor": sensor, "iot": iot, "float": floatwalk}


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("dataset", choices=list(GENERATORS))
    p.add_argument("path")
    p.add_argument("--series", type=int, default=100)
    p.add_argument("--days", type=int, default=3)
    p.add_argument("--step", type=int, default=10)
    a = p.parse_args()
    with open(a.path, "w", buffering=1 << 20) as f:
        GENERATORS[a.dataset](f, a.series, a.days, a.step, 42)
