#!/usr/bin/env bash
# The S3 retraining example without AWS: a moto_server S3 API on a loopback port, the example's source
# data uploaded to it, then two runs. The first promotes every region's model (there is no current one);
# the second trains with degree-3 features and promotes a region only where that lowers val_loss
# (with this data it overfits, so every region keeps its model: the summary says "kept").
#
#   pip install -e '.[examples,test]'    # dagflow, scikit-learn, moto[server]
#   examples/region-retrain-s3/demo.sh
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python}
DAGFLOW=("$PYTHON" -m dagflow)

PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PYTHON" -m moto.server -H 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
MOTO=$!
trap 'kill "$MOTO" 2>/dev/null; rm -f .pipeline-degree3.yaml' EXIT

# Dummy credentials that only this throwaway local server sees; real runs use the standard AWS chain.
export AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo AWS_DEFAULT_REGION=us-east-1
export AWS_ENDPOINT_URL="http://127.0.0.1:$PORT"
for _ in $(seq 100); do
    "$PYTHON" -c "import urllib.request; urllib.request.urlopen('$AWS_ENDPOINT_URL/moto-api/')" 2>/dev/null && break
    sleep 0.1
done
"$PYTHON" -c 'import boto3; boto3.client("s3").create_bucket(Bucket="dagflow-demo")'

echo "== upload the source data"
"${DAGFLOW[@]}" transfer ../region-retrain/source/ s3://dagflow-demo/source/
echo "== run 1: no current models, so every region is promoted"
"${DAGFLOW[@]}" run pipeline.yaml --jobs 2 --no-cache
echo "== run 2: degree-3 features; a region is promoted only where val_loss is lower"
sed 's/^  degree: 1$/  degree: 3/' pipeline.yaml > .pipeline-degree3.yaml
"${DAGFLOW[@]}" run .pipeline-degree3.yaml --jobs 2 --no-cache
echo "== the pointers"
for region in us br de jp; do
    "${DAGFLOW[@]}" transfer -q "s3://dagflow-demo/models/$region/latest" ".latest-$region.json"
    "$PYTHON" -c "import json; p = json.load(open('.latest-$region.json')); print('$region', p['run_id'], round(p['metrics']['val_loss'], 4))"
    rm -f ".latest-$region.json"
done
