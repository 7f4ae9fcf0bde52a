# HIPS Spearmint's examples/constrained/branin_con.py in Python 3, with the NaN region its comment
# describes switched on: outside 0 <= X <= 5, Y <= 5 the job returns NaN (a bare NaN stands for every
# task, as HIPS's launcher has it). The constrained minimum, 0.8447 at (2.945, 2.945), lies inside.
import math

import numpy as np


def evaluate(job_id, params):
    x = float(params["X"])
    y = float(params["Y"])
    print(f"Evaluating at ({x:f}, {y:f})")
    if x < 0 or x > 5.0 or y > 5.0:
        return np.nan
    obj = float(
        np.square(y - (5.1 / (4 * np.square(math.pi))) * np.square(x) + (5 / math.pi) * x - 6)
        + 10 * (1 - (1.0 / (8 * math.pi))) * np.cos(x)
        + 10
    )
    con1 = float(y - x)  # y >= x
    con2 = float(10.0 - y)  # y <= 10
    return {"branin": obj, "y_at_least_x": con1, "y_at_most_10": con2}


def main(job_id, params):
    try:
        return evaluate(job_id, params)
    except Exception as ex:
        print(ex)
        print("An error occurred in branin_con.py")
        return np.nan
