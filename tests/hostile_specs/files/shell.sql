\shell touch /tmp/blocklab-hostile-canary-script
SELECT 1;
