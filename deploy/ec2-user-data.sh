#!/bin/bash
# EC2 user data for a dagflow GPU execute node (put it in the Auto Scaling group's launch template).
# Assumes an AMI with the NVIDIA driver, HTCondor and dagflow installed (pip install dagflow).
# The pool token comes from SSM Parameter Store (SecureString) through the instance role; it is
# written with umask 077 and never passed on a command line or into HTCondor's config. It is made once,
# on the central manager, with condor_token_create (README: "The pool's token").
set -euo pipefail
CENTRAL_MANAGER="cm.internal.example.org"
TOKEN_PARAMETER="/dagflow/pool-token"

REGION="$(TOKEN=$(curl -sf -X PUT http://169.254.169.254/latest/api/token \
            -H 'X-aws-ec2-metadata-token-ttl-seconds: 60') && \
          curl -sf -H "X-aws-ec2-metadata-token: $TOKEN" \
            http://169.254.169.254/latest/meta-data/placement/region)"
install -d -m 0700 /etc/condor/tokens.d
(umask 077 && aws ssm get-parameter --region "$REGION" --name "$TOKEN_PARAMETER" --with-decryption \
   --query Parameter.Value --output text > /etc/condor/tokens.d/pool.token)

cat > /etc/default/dagflow-agent <<CONF
DAGFLOW_CENTRAL_MANAGER=$CENTRAL_MANAGER
DAGFLOW_TOKEN_FILE=/etc/condor/tokens.d/pool.token
CONF
# The unit ships in dagflow's wheel; `dagflow agent deploy-dir` says where it was installed.
install -m 0644 "$(/usr/local/bin/dagflow agent deploy-dir)/dagflow-agent.service" /etc/systemd/system/
systemctl daemon-reload
systemctl enable --now dagflow-agent.service   # configures, then watches for spot notices
systemctl restart condor.service               # start (or restart) HTCondor with the new config
