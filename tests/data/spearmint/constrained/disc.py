# The unconstrained minimum, (1, 1), is infeasible; under a + b >= 3 the minimum is 0.5 at (1.5, 1.5).
def main(job_id, params):
    a, b = float(params["a"]), float(params["b"])
    return {"distance": (a - 1) ** 2 + (b - 1) ** 2, "sum_at_least_3": a + b - 3}
