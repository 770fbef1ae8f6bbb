LISTEN belay_wakeup;
