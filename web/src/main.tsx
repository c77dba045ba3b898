import '@picocss/pico/css/pico.min.css';
import './styles.css';
import { render } from 'preact';
import { restoreSession } from './api.ts';
import { App } from './app.tsx';

render(<App />, document.getElementById('app')!);
void restoreSession();
