import json
import math


def main(job_id, params):
    x = float(params["x"])  # a length-1 array: float() of it worked under old numpy
    shape = params["shape"][0]
    with open("calls.txt", "a") as handle:
        handle.write(json.dumps({"job_id": job_id, "x": x, "shape": shape, "twice": float(params["x"] * 2)}) + "\n")
    return (x - 0.5) ** 2 + (0.0 if shape == "round" else 1.0) + 0.01 * math.cos(x)
