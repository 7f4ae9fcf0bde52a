# Records which interpreter ran it: the search names one with --python.
import sys


def main(job_id, params):
    with open("interpreters.txt", "a") as handle:
        handle.write(sys.executable + "\n")
    return (float(params["x"]) - 0.25) ** 2 + sum(int(k) for k in params["n"])
