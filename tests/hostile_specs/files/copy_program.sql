COPY (SELECT 1) TO PROGRAM 'touch /tmp/blocklab-hostile-canary-copy';
