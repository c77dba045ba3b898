// The dashboard's entry point (C43): mounts the app in the page and restores the session.
import '@picocss/pico/css/pico.min.css';
import './styles.css';
import { render } from 'preact';
import { restoreSession } from './api.ts';
import { App } from './app.tsx';

render(<App />, document.getElementById('app')!);
void restoreSession();
