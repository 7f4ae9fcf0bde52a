def main(job_id, params):
    return float(params["x"]) ** 2
