def main(job_id, params):
    u = float(params["u"])
    k = int(params["k"])
    steps = list(range(params["k"]))  # an INT of size 1 as an index, as Spearmint's users wrote it
    bonus = 0.0 if params["opt"][0] == "adam" else 0.5
    return (u - 1.5) ** 2 + 0.1 * (k - 3) ** 2 + bonus + 0.0 * len(steps)
