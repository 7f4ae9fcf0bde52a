import hashlib
import os


def true_value(x):
    return 10.0 * (x - 0.3) ** 2


def main(job_id, params):
    x = float(params["x"])
    # Reproducible "noise" (sd about 0.3) from the point itself, and one very lucky draw at the first
    # job far from the valley: the lowest observed value is that luck, not the best point.
    digest = hashlib.sha256(repr(round(x, 12)).encode()).digest()
    noise = (digest[0] / 255.0 - 0.5) * 1.0
    if x > 0.7 and not os.path.exists("lucky.txt"):
        with open("lucky.txt", "w") as handle:
            handle.write(str(job_id))
        noise = -6.0
    return true_value(x) + noise
