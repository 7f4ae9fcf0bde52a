def main(job_id, params):
    x, y = float(params["x"]), float(params["y"])
    return {"f": (x - 0.25) ** 2 + (y - 0.75) ** 2}
