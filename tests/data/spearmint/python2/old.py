def main(job_id, params):
    print 'Evaluating at %f' % params['x']
    return float(params['x'])
