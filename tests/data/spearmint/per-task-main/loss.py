def main(job_id, params):
    return {"loss": float(((params["p"] - 0.25) ** 2).sum())}
