function result = objective(job_id, params)
result = (params.x - 0.5) ^ 2;
